#!/bin/bash
#$ -N homejob
#$ -l h_rt=0:01:00
#$ -j y
echo "in $(pwd)"
