#!/bin/bash
#SBATCH -J omp-graph
#SBATCH -e graph_%A_%a.err
#SBATCH -o graph_n1000_%A_%a.out
#SBATCH -c 16
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
# gridsched corpus: replaced ./count -m $SLURM_ARRAY_TASK_ID -n 1000
echo "task ${SLURM_ARRAY_TASK_ID:-none}"
