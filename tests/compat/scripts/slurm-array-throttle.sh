#!/bin/bash

#SBATCH -p fast # partition
#SBATCH -N 1   # nodes
#SBATCH --mem 1G # memory for the whole job
#SBATCH -n 1 # tasks
#SBATCH -t 0-0:1 # limit, D-HH:MM
#SBATCH -o slurm_array_%A-%a.out
#SBATCH -e slurm_array_%A-%a.err
#SBATCH --array=0-9%4

# Ten tasks, four of them at most running together.

echo "task $SLURM_ARRAY_TASK_ID times ten"
# gridsched corpus: replaced ./multiply.sh $SLURM_ARRAY_TASK_ID 10
echo "result $((SLURM_ARRAY_TASK_ID * 10))"
