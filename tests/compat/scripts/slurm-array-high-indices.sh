#!/bin/bash

#SBATCH --time=6:00:00   # time limit
#SBATCH --ntasks=1   # tasks (one core each)
#SBATCH --nodes=1   # nodes
#SBATCH --mem-per-cpu=4000M   # memory for each core
#SBATCH --mail-user=someone@example.org   # where mail goes
#SBATCH --mail-type=BEGIN
#SBATCH --mail-type=END
#SBATCH --mail-type=FAIL
#SBATCH --output=out_split/slrm_%a.out 
#SBATCH --array=9000-9999

# gridsched corpus: replaced python run_ith_test.py $SLURM_ARRAY_TASK_ID
echo "test $SLURM_ARRAY_TASK_ID"
