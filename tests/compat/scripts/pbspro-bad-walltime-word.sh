#!/bin/bash
#PBS -N typo
#PBS -l walltime=two_hours
#PBS -l select=1:ncpus=1
echo "never submitted"
