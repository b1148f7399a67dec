#!/bin/bash                      
#SBATCH -t 00:05:00          # five minutes at most
#SBATCH -n 1                 # a single task
hostname                     # which node runs it

# gridsched corpus: replaced python src/main.py
echo main
