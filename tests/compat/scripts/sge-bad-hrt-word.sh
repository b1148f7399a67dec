#!/bin/bash
#$ -cwd
#$ -l h_rt=ten
echo "never submitted"
