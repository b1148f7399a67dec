#!/bin/bash
#SBATCH --signal=B:USR1@60
#SBATCH --requeue
#SBATCH -t 10:00
#SBATCH -n 2
trap 'echo "saving state"; exit 0' USR1
echo "working"
