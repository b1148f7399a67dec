#!/bin/bash 
#PBS -N Array_Example
#PBS -o out
#PBS -e out
#PBS -l select=1:ncpus=1:mem=32mb
#PBS -l walltime=00:30:00
#PBS -J 0-127:1
#PBS -M someone@example.org
#PBS -m ae
#PBS -V
#PBS -q tiny

# gridsched corpus: replaced source /home/anaconda3/bin/activate
echo activate
cd $PBS_O_WORKDIR
# gridsched corpus: replaced python Array_Example.py
echo "index $PBS_ARRAY_INDEX"
