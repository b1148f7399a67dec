#PBS -q workq
#PBS -S /bin/bash 
#PBS -l select=1:ncpus=6:mpiprocs=1:ompthreads=6
#PBS -l walltime=24:00:00 
#PBS -V

NCORE=`cat $PBS_NODEFILE | wc -l`
declare -a parts=(a b c)
echo "bash arrays: ${#parts[@]}"

cd $PBS_O_WORKDIR

# gridsched corpus: replaced mpirun -machinefile $PBS_NODEFILE ./run
echo "cores $NCORE"
