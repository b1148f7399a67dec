#!/bin/bash
#SBATCH --qos normal
#SBATCH --account myproject
#SBATCH --time 0:0:30
#SBATCH --job-name "SlurmArrayJob"
#SBATCH --array=1-10%2

# gridsched corpus: replaced module purge
echo module purge

echo "host: $(hostname)"
echo "job id: ${SLURM_JOB_ID}"
echo "array id: ${SLURM_ARRAY_JOB_ID}"
echo "index: ${SLURM_ARRAY_TASK_ID}"

# gridsched corpus: replaced sleep 4
sleep 0
