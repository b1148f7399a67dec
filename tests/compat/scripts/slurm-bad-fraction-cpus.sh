#!/bin/bash
#SBATCH --cpus-per-task=2.5
echo "never submitted"
