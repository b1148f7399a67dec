#!/bin/bash

#$ -cwd
#$ -q gpu.q -l gpu=2
#$ -l mem_free=8G
#$ -l num_proc=2
#$ -l h_rt=8:00:00
#$ -j y

hostname
env| grep SGE_HGR_gpu
# gridsched corpus: replaced ml load cuda90/toolkit
echo ml load
env | grep CUDA_VISIBLE_DEVICES
# gridsched corpus: replaced nvidia-smi
echo nvidia-smi
