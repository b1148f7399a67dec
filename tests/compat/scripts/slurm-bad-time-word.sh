#!/bin/bash
#SBATCH --job-name=typo
#SBATCH --time=abc
#SBATCH --ntasks=1
echo "never submitted"
