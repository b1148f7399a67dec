#!/bin/bash
#SBATCH -J chd
#SBATCH -D run
#SBATCH -o %x.%j.log
#SBATCH -t 1:00
pwd
