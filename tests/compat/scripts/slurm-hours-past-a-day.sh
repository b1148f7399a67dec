#!/bin/bash
#SBATCH --time=2-25:00:00
#SBATCH --job-name=long
echo "days and hours"
