#!/bin/bash
#SBATCH --array=1-3
#SBATCH --output=run_%3a.log
#SBATCH --time=5

echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT"
