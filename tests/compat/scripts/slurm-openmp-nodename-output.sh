#!/bin/bash
#SBATCH --job-name="hello_omp"
#SBATCH --output="hello_omp.%j.%N.out"
#SBATCH --partition=compute
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=12
#SBATCH --mem=8G
#SBATCH --account=<<project*>>
#SBATCH --export=ALL
#SBATCH -t 01:30:00

export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
# gridsched corpus: replaced ./hello_openmp
echo "hello from $SLURM_JOB_NODELIST"
