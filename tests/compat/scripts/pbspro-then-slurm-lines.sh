#!/bin/bash
#PBS -N mixed
#PBS -l select=1:ncpus=4:mem=2gb
#PBS -l walltime=00:10:00
#SBATCH -n 2
#SBATCH -t 5
echo "the first kind of line wins"
