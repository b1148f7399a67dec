#!/bin/bash
#SBATCH --job-name=notify
#SBATCH --mail-user=<YOUR_EMAIL>
#SBATCH --mail-type=END,FAIL
#SBATCH --time=0-00:10
echo "done, mail would follow"
