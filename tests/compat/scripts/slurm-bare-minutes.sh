#!/bin/bash
#SBATCH -n 1 # tasks
#SBATCH -t 5 # limit in minutes
#SBATCH -o minutes_%j.out # output goes here

hostname
