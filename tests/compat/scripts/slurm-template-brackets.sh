#!/bin/bash
                                                                                                    
#SBATCH -p [SPECIFY PARTITION NAME]                     # partition                                
#SBATCH --time=8:30:00                                  # time limit                              
#SBATCH -c 1                                            # a single core                            
#SBATCH --mem=4000M                                                                                
#SBATCH -o /dev/null                                    # output and errors are thrown away              

# gridsched corpus: replaced codetta align $SLURM_ARRAY_TASK_ID
echo align
