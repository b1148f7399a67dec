#PBS -l nodes=1:ppn=1
#PBS -l walltime=00:10:00
#PBS -N myjob
#PBS -j oe
#PBS -m bea

cd $PBS_O_WORKDIR
echo "myjob runs on " `hostname`
# gridsched corpus: replaced python2.7 parallelQ.py $PBS_ARRAYID
echo "done"
