#!/bin/bash
#SBATCH --export=NONE
#SBATCH --get-user-env=30L
#SBATCH -t 00:05:00
#SBATCH -o login-env.%j
echo "home is $HOME"
