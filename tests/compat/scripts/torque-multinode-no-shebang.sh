#PBS -l walltime=0:10:00,nodes=3:ppn=4
#PBS -m abe
#PBS -M someone@example.org
#PBS -e ./error.txt
#PBS -o ./outputB.csv
# gridsched corpus: replaced source /etc/bash.bashrc
echo bashrc
cd $PBS_O_WORKDIR
# gridsched corpus: replaced mpirun main -l b -P 0.8 -p 2 -n 1
echo main
