#!/bin/bash
#$ -N mix
#$ -cwd
#$ -l h_rt=0:20:0
#SBATCH -n 4
#SBATCH -t 5
echo "grid engine lines first"
