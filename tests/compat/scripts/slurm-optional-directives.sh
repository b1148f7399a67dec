#!/bin/bash
#SBATCH --job-name=job_name  # name shown in the queue
#SBATCH --nodes=1  # nodes needed
#SBATCH --ntasks-per-node=4  # cores on each node
#SBATCH --time=01:00:00  # longest run

# May be left out:
#SBATCH --partition=queue_name  # partition
#SBATCH --output=output_file  # output file
#SBATCH --error=error_file  # error file

# gridsched corpus: replaced the pipeline command
echo "pipeline with $SLURM_NTASKS_PER_NODE tasks"
