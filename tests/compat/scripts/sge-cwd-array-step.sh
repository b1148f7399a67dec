#!/bin/bash
#$ -cwd
#$ -N steps
#$ -t 2-10:4
#$ -j y
#$ -l h_rt=0:05:00
echo "task $SGE_TASK_ID first $SGE_TASK_FIRST last $SGE_TASK_LAST step $SGE_TASK_STEPSIZE"
