#!/bin/bash
#SBATCH -n 1 # tasks
#SBATCH -N 1 # everything on one node
#SBATCH -t 0-00:05 # limit as D-HH:MM
#SBATCH --mem=100 # memory of the whole job, in MB
#SBATCH -o hostname_%j.out # output goes here
#SBATCH -e hostname_%j.err # errors go here

hostname
