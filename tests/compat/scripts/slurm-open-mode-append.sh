#!/bin/bash
#SBATCH --open-mode=append
#SBATCH -o shared.log
#SBATCH -e shared.err
#SBATCH -t 15
date
echo "appended"
