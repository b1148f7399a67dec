#!/bin/bash
#SBATCH -J both
#SBATCH -n 4
#SBATCH -t 30
#PBS -N both
#PBS -l nodes=1:ppn=8,walltime=02:00:00
echo "ran as $SLURM_JOB_NAME"
