#!/bin/bash
#SBATCH --mem=2g
#SBATCH --ntasks=3
#SBATCH --time=90
echo "lower case unit"
