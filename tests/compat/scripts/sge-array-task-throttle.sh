#!/bin/bash 

# a name to find it by 
#$ -N figopt
# run in the submit directory 
#$ -cwd 
# take the submitting environment along
#$ -V 
# errors into the output file 
#$ -j y 
# files in this directory 
#$ -e logs 
#$ -o logs 
# never rerun 
#$ -r n 
# an array of tasks 
#$ -t 1-380
# queue
#$ -q corei7b
# at most this many tasks at once
#$ -tc 50
# priority, -1023 to 1024, 0 by default
#$ -p -1

# gridsched corpus: replaced sleep $SGE_TASK_ID
sleep 0
echo $SGE_TASK_ID $HOSTNAME
# gridsched corpus: replaced python run.py $SGE_TASK_ID
echo run $SGE_TASK_ID
