#!/bin/bash
#SBATCH --mem=6G
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --partition=gpucloud
#SBATCH --gpus=2

# gridsched corpus: replaced module purge
echo module purge
# gridsched corpus: replaced module load python/3.8-cuda-ml
echo module load

# for an interactive shell: srun --pty --gpus=2 bash

# gridsched corpus: replaced srun python train.py
echo "gpus: $CUDA_VISIBLE_DEVICES"
