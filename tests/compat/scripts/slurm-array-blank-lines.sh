#!/bin/bash

#SBATCH --partition=main

#SBATCH --job-name=SM-ARR

#SBATCH --array=1-10%10

#SBATCH --cpus-per-task=1

#SBATCH --mem=2G

#SBATCH --time=48:00:00

#SBATCH --output=R4-%A.%a.out # output of each task

#SBATCH --error=R4-%A.%a.err  # errors of each task

# gridsched corpus: replaced module purge
echo module purge

echo "array task starting"

# gridsched corpus: replaced srun ./out
echo "task $SLURM_ARRAY_TASK_ID"
