#!/bin/bash
#SBATCH --job-name=test
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH
--mem=32G
#SBATCH --partition=gpu
#SBATCH --gres=gpu:1

# gridsched corpus: replaced python main.py
echo main
