#!/bin/bash
 
#PBS -l walltime=3:00:00,select=1:ncpus=1:mem=4gb
#PBS -J 0-7
#PBS -N femArray0.5
#PBS -A <ACCOUNT>
#PBS -m abe
#PBS -M <EMAIL>
#PBS -o output_^array_index^.txt
#PBS -e error_^array_index^.txt
 
################################################################################
 
# gridsched corpus: replaced module load gcc
echo module load gcc

echo I am job index: $PBS_ARRAY_INDEX

cd $PBS_O_WORKDIR

# gridsched corpus: replaced ./run_client.sh $(($PBS_ARRAY_INDEX + 1))
echo run_client $(($PBS_ARRAY_INDEX + 1))
