#!/bin/bash
#$ -cwd
#$ -pe smp 2
#$ -l gpu=1,h_vmem=2G,h_rt=2:00:00
#$ -o gpu.out
#$ -e gpu.err
echo "gpu $CUDA_VISIBLE_DEVICES slots $NSLOTS"
