#!/bin/bash
#SBATCH --cpus-per-task=0
#SBATCH -t 10
echo "never submitted"
