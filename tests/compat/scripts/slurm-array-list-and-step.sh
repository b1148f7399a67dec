#!/bin/bash
#SBATCH --array=0-20:5,7
#SBATCH -o %A_%a.out
#SBATCH -t 00:02:00
#SBATCH --mem=256M
case $SLURM_ARRAY_TASK_ID in
  7) echo "the odd one" ;;
  *) echo "step $SLURM_ARRAY_TASK_ID" ;;
esac
