#!/bin/bash
#SBATCH -J mv1     # name
#SBATCH -o mv1.o%j       # one file for output and errors (%j: the job id)
#SBATCH -n 16              # MPI ranks in all
#SBATCH -p development     # partition (development, normal, ...)
#SBATCH -t 01:30:00        # time limit hh:mm:ss, here 90 minutes
#SBATCH --mail-user=someone@example.org
#SBATCH --mail-type=begin  # mail at the start
#SBATCH --mail-type=end    # mail at the end
# gridsched corpus: replaced ibrun ./mv1
echo mv1
