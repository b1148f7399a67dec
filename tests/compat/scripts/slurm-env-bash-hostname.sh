#!/usr/bin/env bash

#SBATCH --job-name=hello-my-hostname-is
#SBATCH --account=abc123
#SBATCH --partition=debug
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --mem=1G
#SBATCH --time=00:05:00
#SBATCH --output=%x.o%j.%N

hostname
echo "done"
