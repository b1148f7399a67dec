#!/bin/bash
#SBATCH --job-name=ddp-train
#SBATCH --ntasks=2
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=4
#SBATCH --mem=12G
#SBATCH --time=02:00:00
#SBATCH --output=logs/%x-%j.out

# one process per GPU; the first host is the rendezvous point
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=29500
echo "master $MASTER_ADDR tasks $SLURM_NTASKS gpus $CUDA_VISIBLE_DEVICES"
# gridsched corpus: replaced srun torchrun --nproc_per_node=1 train.py
srun bash -c 'echo "rank $SLURM_PROCID of $SLURM_NTASKS"'
