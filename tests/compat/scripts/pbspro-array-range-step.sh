#!/bin/bash
#PBS -N sweep
#PBS -J 1-9:2
#PBS -l select=1:ncpus=1:mem=500mb
#PBS -l walltime=00:15:00
echo "subjob $PBS_ARRAY_INDEX of $PBS_ARRAY_ID"
