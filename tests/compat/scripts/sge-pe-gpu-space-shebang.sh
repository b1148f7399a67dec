#! /bin/sh
#$ -N training_explore
#$ -cwd
#$ -l h_rt=8:00:00

#$ -pe gpu-titanx 2
#$ -l h_vmem=4G

# gridsched corpus: replaced bash training_explore.sh $SGE_TASK_ID
echo "explore $SGE_TASK_ID"
