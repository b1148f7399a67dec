#!/bin/bash
#PBS -N train
#PBS -q gpu
#PBS -l select=1:ncpus=8:ngpus=2:mem=16gb
#PBS -l walltime=12:00:00
#PBS -j oe
#PBS -o train.log

cd "$PBS_O_WORKDIR"
echo "gpus $CUDA_VISIBLE_DEVICES on $(hostname)"
# gridsched corpus: replaced python train.py --epochs 90
