#!/bin/bash
#SBATCH --job-name=JOBNAME
#SBATCH --nodes=1 # machines to use
#SBATCH --ntasks=1 # tasks (keep this at 1)
#SBATCH --cpus-per-task=20 # cores for the task
#SBATCH --time=2-00:00:00 # limit as d-hh:mm:ss or minutes
#SBATCH --mem=12G # memory of the job
#SBATCH --mail-type=FAIL,BEGIN,END # mail on these events
#SBATCH --mail-user=someone@example.org # mail goes here
#SBATCH -o logs/firstjob_%j.out # edit before use
#SBATCH -e logs/firstjob_%j.err # edit before use
echo "Hello!" # the work
