#!/bin/bash
#SBATCH -J omp_bench
#SBATCH -c 8
#SBATCH --mem-per-cpu=500M
#SBATCH -t 0:20:00
#SBATCH --hint=nomultithread

export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
export OMP_PROC_BIND=close
echo "threads $OMP_NUM_THREADS"
