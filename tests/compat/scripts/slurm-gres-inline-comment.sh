#!/bin/bash
#SBATCH --gres=gpu:2 # GPUs wanted on the node
#SBATCH --nodes=1
#SBATCH --partition=vision-gpu
# gridsched corpus: replaced python -u train.py
echo "gpus: $CUDA_VISIBLE_DEVICES"
