#PBS -N Work08P
#PBS -l nodes=1:ppn=8,pmem=512mb
#PBS -l walltime=0:20:00
#PBS -q q64p48h@raptor
#PBS -o /dev/null
#PBS -e /dev/null
#PBS -r n
#PBS -V
cd $PBS_O_WORKDIR
#ulimit -s unlimited
# gridsched corpus: replaced mpirun -np 8 ring >& ring.out
echo ring
