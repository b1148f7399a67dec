#!/bin/bash -x
#SBATCH --ntasks=XXXmpinodesXXX
#SBATCH --cpus-per-task=XXXthreadsXXX
#SBATCH --partition=XXXqueueXXX
#SBATCH --time=XXXextra1XXX:00:00
#SBATCH --error=XXXerrfileXXX

export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK}
# gridsched corpus: replaced srun XXXcommandXXX
echo XXXcommandXXX
