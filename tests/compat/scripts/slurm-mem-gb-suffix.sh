#!/bin/bash
#SBATCH --mem=4GB
#SBATCH -c 2
#SBATCH -t 45
echo "four gigabytes"
