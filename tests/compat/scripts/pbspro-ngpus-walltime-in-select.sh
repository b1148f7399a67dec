#!/bin/bash
#
#PBS -N DS_cvt
#PBS -l select=1:ncpus=8:mpiprocs=8:ngpus=2:mem=16gb,walltime=15:00:00
#PBS -o DS_cvt.txt
#PBS -j oe

# gridsched corpus: replaced nvidia-smi
echo "gpus: $CUDA_VISIBLE_DEVICES"
cd $PBS_O_WORKDIR
# gridsched corpus: replaced python train_model.py
echo train_model
