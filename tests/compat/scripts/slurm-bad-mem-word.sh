#!/bin/bash
#SBATCH -n 1
#SBATCH --mem=lots
echo "never submitted"
